import os

NAME_6 = 'm6'
