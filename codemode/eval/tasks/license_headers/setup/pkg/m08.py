import os

NAME_8 = 'm8'
