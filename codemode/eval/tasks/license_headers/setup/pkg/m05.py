import os

NAME_5 = 'm5'
