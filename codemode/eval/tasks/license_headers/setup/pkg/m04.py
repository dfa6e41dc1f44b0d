import os

NAME_4 = 'm4'
